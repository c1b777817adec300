"""PyTorch profiler (Kineto) trace loading and analyses, HTA-compatible on request."""
