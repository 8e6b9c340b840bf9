#version 330 core
// The atlas holds glyph coverage in the red channel; a solid cell serves panels.
uniform sampler2D u_atlas;
in vec2 v_uv;
in vec4 v_color;
out vec4 f_color;
void main() {
    float a = texture(u_atlas, v_uv).r;
    f_color = vec4(v_color.rgb, v_color.a * a);
}
