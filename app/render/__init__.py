"""moderngl rendering: scene target, instanced objects, node boxes, frustum lines, HUD text.

Everything here needs an OpenGL 3.3 core context (a pyglet window or headless EGL).
"""
