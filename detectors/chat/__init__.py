"""Multimodal LLM detectors asked through the OpenAI Chat Completions API, as RA-Bench evaluates them.

The package owns what such a detector is beyond a server: its prompt templates and the three presets
(:mod:`~detectors.chat.prompts`), the deterministic parse of a reply (:mod:`~detectors.chat.replies`), the HTTP
exchange with its retries (:mod:`~detectors.chat.client`), the requests in flight across processes
(:mod:`~detectors.chat.slots`) and the reply cache (:mod:`~detectors.chat.cache`). The runtime that puts them
together is :mod:`detectors.runtimes.chat`.
"""
