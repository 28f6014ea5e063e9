"""The HTTP rules of every detector server the project asks (Open Inference Protocol, Chat Completions): the card's
endpoint alone, no redirect followed, no proxy taken from the environment, and replies read to a bound."""

from __future__ import annotations

import urllib.request

REPLY_BYTES = 16 * 1024 * 1024  # the most of one HTTP reply read (scores, metadata and chat replies are a few KB)


class ReplyTooLarge(OSError):
    """An HTTP reply over :data:`REPLY_BYTES`: never read whole (a server misbehaving, or not the model's)."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an error, never followed: the endpoint is the card's, and no other host is asked."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


# no proxy from the environment (HTTP_PROXY would take scores, and frames, through another host), no redirects
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())


def read_bounded(request: urllib.request.Request, timeout_s: float) -> bytes:
    """The body of ``request``'s reply, by :data:`OPENER`; :class:`ReplyTooLarge` past :data:`REPLY_BYTES`;
    urllib's own errors (``HTTPError`` for a status of 400 or more, ``URLError``, ``TimeoutError``) as raised."""
    with OPENER.open(request, timeout=timeout_s) as r:
        reply = r.read(REPLY_BYTES + 1)
    if len(reply) > REPLY_BYTES:
        raise ReplyTooLarge(f"a reply of more than {REPLY_BYTES} bytes from {request.full_url}")
    return reply
