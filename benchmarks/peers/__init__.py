"""The tools a user would pick instead of scanwatch, measured side by side against the same simulator."""
