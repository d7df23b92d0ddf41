"""Judging a port, framework-free: a replay compared as it runs (live.py). The adapters
(tracekit/tf2/, tracekit/torch/) hand it their replays."""
