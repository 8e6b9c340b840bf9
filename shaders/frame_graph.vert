#version 330 core
// The frame-time graph's coloured rectangles, in pixels (origin top-left).
uniform vec2 u_screen;
in vec2 in_pos;
in vec4 in_color;
out vec4 v_color;
void main() {
    vec2 ndc = vec2(in_pos.x / u_screen.x * 2.0 - 1.0, 1.0 - in_pos.y / u_screen.y * 2.0);
    gl_Position = vec4(ndc, 0.0, 1.0);
    v_color = in_color;
}
