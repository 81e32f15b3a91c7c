"""``envgym serve``: registered environments over WebSocket and HTTP (protocol: docs/serving.md).

:mod:`envgym.serve.codec` is the JSON codec of observations, actions, infos and spaces, shared
with the client :mod:`envgym.remote`.
"""
