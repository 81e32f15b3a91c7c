"""MCP both ways: any MCP server as an envgym environment, any envgym tool env as an MCP server.

* ``gymnasium.make("envgym/MCP-v0", server=..., tasks=..., verifier=...)`` (:class:`MCPEnv`):
  the server's tools are the actions, a task list and a verifier decide the reward;
* ``envgym mcp serve ID`` (:func:`build_server`, :func:`serve`): the tools of an envgym env
  (``info["tools"]``), plus ``reset`` and, for text envs, ``act``, over stdio or streamable HTTP.

Both go through the official ``mcp`` SDK (``pip install 'envgym[mcp]'``), imported only when a
connection or a server is made; docs/mcp.md has the details.
"""

from envgym._imports import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "client": ("MCPConnection", "MCPServerError", "MCPToolResult", "openai_tools"),
        "env": ("MCP_ID", "MCPEnv", "load_tasks"),
        "server": ("EnvSessions", "HTTPServer", "build_server", "serve", "start_http"),
    },
)
