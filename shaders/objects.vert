#version 330 core
// Instanced objects: a unit-sphere mesh scaled by the object's radius and moved to its centre.
uniform mat4 u_viewproj;

in vec3 in_position;   // mesh vertex, inside the unit sphere
in vec3 in_normal;
in vec4 in_sphere;     // per instance: centre xyz, radius w
in vec3 in_color;      // per instance

out vec3 v_normal;
out vec3 v_color;

void main() {
    vec3 world = in_sphere.xyz + in_position * in_sphere.w;
    gl_Position = u_viewproj * vec4(world, 1.0);
    v_normal = in_normal;
    v_color = in_color;
}
