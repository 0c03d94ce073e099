"""Benchmark workloads: each module has NAME and cases(size) -> list[common.Case]."""

# Table order.
ALL = ["dispatch", "mlp", "transformer", "decode", "resnet", "gru"]
