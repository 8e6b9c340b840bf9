"""cullview: a reference real-time visibility-culling viewer and its spatial indexes."""

__version__ = "0.1.0"
