#version 330 core
// Z-pyramid reduction: one full-screen triangle per level (no vertex attributes).
void main() {
    vec2 p = vec2(float((gl_VertexID << 1) & 2), float(gl_VertexID & 2));
    gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);
}
