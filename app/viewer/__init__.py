"""The viewer: frame sequence (frame.py), headless runner, pyglet window, command line."""
