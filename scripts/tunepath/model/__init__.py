"""Typed records every layer shares: the host context, command blocks and variants, recorded runs."""
