"""The Slack bot (Bolt, socket mode)."""
