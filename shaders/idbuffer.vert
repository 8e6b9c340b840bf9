#version 330 core
// Ground-truth id buffer: the same instanced geometry as objects.vert (unit-sphere mesh scaled
// by the radius, moved to the centre), writing each instance's integer id.
uniform mat4 u_viewproj;

in vec3 in_position;   // mesh vertex, inside the unit sphere
in vec4 in_sphere;     // per instance: centre xyz, radius w
in int in_id;          // per instance: object id

flat out int v_id;

void main() {
    vec3 world = in_sphere.xyz + in_position * in_sphere.w;
    gl_Position = u_viewproj * vec4(world, 1.0);
    v_id = in_id;
}
