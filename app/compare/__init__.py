"""The compare page: several runs' metrics overlaid by step, their findings and spec
differences."""
