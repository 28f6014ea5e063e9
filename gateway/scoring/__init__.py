"""The scoring engine: a video's bytes fetched, its conditions rendered, every detector's scores, in worker
processes (pipeline.py, assembly.py: a pipeline from settings; worker.py: the one entry point a worker runs;
pool.py: the worker processes; supervisor.py: a video's fate). The tap and the replay both drive it;
:mod:`gateway.core` holds the vocabulary it speaks (settings, messages, sources)."""
