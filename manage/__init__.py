"""`cairn-manage`, the operator's entry point: the only code that uses `migrations`."""
