#version 330 core
// Node-box overlay: the 12 edges of a unit cube (24 line vertices), one instance per node box.
uniform mat4 u_viewproj;

in vec3 in_corner;     // 0/1 per axis
in vec3 in_lo;         // per instance
in vec3 in_hi;
in vec4 in_color;

out vec4 v_color;

void main() {
    vec3 p = mix(in_lo, in_hi, in_corner);
    gl_Position = u_viewproj * vec4(p, 1.0);
    v_color = in_color;
}
