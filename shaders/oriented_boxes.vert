#version 330 core
// Oriented node boxes (nested indexes): the 12 edges of a unit cube mapped onto a
// parallelepiped given by a corner and its three edge vectors (a box turned with its group).
uniform mat4 u_viewproj;

in vec3 in_corner;     // 0/1 per axis
in vec3 in_origin;     // per instance: corner 0
in vec3 in_ex;         // corner 1 - corner 0
in vec3 in_ey;         // corner 2 - corner 0
in vec3 in_ez;         // corner 4 - corner 0
in vec4 in_color;

out vec4 v_color;

void main() {
    vec3 p = in_origin + in_corner.x * in_ex + in_corner.y * in_ey + in_corner.z * in_ez;
    gl_Position = u_viewproj * vec4(p, 1.0);
    v_color = in_color;
}
