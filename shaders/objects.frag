#version 330 core
// Directional light plus a little hemisphere ambient so that shapes read in 3D.
uniform vec3 u_light_dir;   // unit vector towards the light

in vec3 v_normal;
in vec3 v_color;

out vec4 f_color;

void main() {
    vec3 n = normalize(v_normal);
    float diffuse = max(dot(n, u_light_dir), 0.0);
    float sky = 0.5 + 0.5 * n.y;
    vec3 c = v_color * (0.25 + 0.15 * sky + 0.7 * diffuse);
    f_color = vec4(c, 1.0);
}
