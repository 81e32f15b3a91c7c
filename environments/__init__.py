"""Environment families. Each subpackage defines ``SPECS`` (a list of ``envgym.EnvSpec``) in its
``__init__`` and keeps the environment code in modules that are imported only when made."""
