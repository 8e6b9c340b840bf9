#version 330 core
// Instanced objects: a unit-sphere mesh scaled by the object's radius and moved to its centre.
// Lighting is per vertex (a directional light plus a little hemisphere ambient, so shapes read
// in 3D): the cube's faces are flat, so the image is the same as per-pixel lighting, and on
// llvmpipe, where buildings fill most of the screen, a fragment shader that only writes an
// interpolated colour cuts the fill cost by about a fifth.
uniform mat4 u_viewproj;
uniform vec3 u_light_dir;   // unit vector towards the light

in vec3 in_position;   // mesh vertex, inside the unit sphere
in vec3 in_normal;
in vec4 in_sphere;     // per instance: centre xyz, radius w
in vec3 in_color;      // per instance

out vec3 v_color;

void main() {
    vec3 world = in_sphere.xyz + in_position * in_sphere.w;
    gl_Position = u_viewproj * vec4(world, 1.0);
    float diffuse = max(dot(in_normal, u_light_dir), 0.0);
    float sky = 0.5 + 0.5 * in_normal.y;
    v_color = in_color * (0.25 + 0.15 * sky + 0.7 * diffuse);
}
