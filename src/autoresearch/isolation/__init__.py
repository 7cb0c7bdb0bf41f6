"""Isolation: the sandbox (bubblewrap), the proposer's confinement, Landlock, the inotify
watch, folders the engine owns, running a command, and the machine's own state."""
