"""The shell: everything a person or a host runs. `runner` (stdin JSON in, one JSON line out),
the argument forms, `doctor`, `state export|import`, `cache clear` and the MCP server. Each is a
thin layer over library calls in the layers below; nothing below imports from here."""
