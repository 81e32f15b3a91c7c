"""Adapters that plug envgym environments into the trainers and protocols the field uses.

One submodule per stack, each imported on its own (``from envgym.integrations.trl import
environment_factory``); importing this package imports none of them, nor their dependencies.
They need the ``integrations`` extra: ``pip install 'envgym[integrations]'``.
"""
