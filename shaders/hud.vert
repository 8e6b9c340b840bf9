#version 330 core
// HUD blocks: one quad per block of text (or panel), in pixel coordinates (origin top-left).
uniform vec2 u_screen;     // layout size in pixels

in vec2 in_pos;            // corner, layout pixels
in vec2 in_local;          // the same corner relative to the text's top-left corner
in vec4 in_grid;           // columns, rows, first row in the character texture, unused
in vec4 in_fg;             // text colour
in vec4 in_bg;             // background colour (alpha 0: no background)

out vec2 v_local;
flat out ivec3 v_grid;
flat out vec4 v_fg;
flat out vec4 v_bg;

void main() {
    vec2 ndc = vec2(in_pos.x / u_screen.x * 2.0 - 1.0, 1.0 - in_pos.y / u_screen.y * 2.0);
    gl_Position = vec4(ndc, 0.0, 1.0);
    v_local = in_local;
    v_grid = ivec3(in_grid.xyz + 0.5);
    v_fg = in_fg;
    v_bg = in_bg;
}
