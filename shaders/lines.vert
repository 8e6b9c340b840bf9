#version 330 core
// Plain coloured world-space lines (the frozen culling frustum).
uniform mat4 u_viewproj;
in vec3 in_position;
in vec4 in_color;
out vec4 v_color;
void main() {
    gl_Position = u_viewproj * vec4(in_position, 1.0);
    v_color = in_color;
}
