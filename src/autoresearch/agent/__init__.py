"""The agent-facing surfaces: the agent-driven mode, its commands, the MCP server, `setup`,
`import` and the self-reported session log. The engine depends on none of it."""
