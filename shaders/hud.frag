#version 330 core
// The character cell under the pixel comes from u_chars (one row of ASCII codes per line of
// text); the glyph's coverage from the font atlas (16 cells per row, code 32 first). Text is
// composited over the block's background here, so each pixel is blended into the frame once.
uniform sampler2D u_atlas;     // glyph coverage in the red channel
uniform usampler2D u_chars;    // R8UI character codes
uniform vec2 u_cell;           // glyph cell size in pixels

in vec2 v_local;
flat in ivec3 v_grid;          // columns, rows, first row in u_chars
flat in vec4 v_fg;
flat in vec4 v_bg;

out vec4 f_color;

void main() {
    float cover = 0.0;
    ivec2 cell = ivec2(floor(v_local / u_cell));
    if (v_local.x >= 0.0 && v_local.y >= 0.0 && cell.x < v_grid.x && cell.y < v_grid.y) {
        int code = int(texelFetch(u_chars, ivec2(cell.x, v_grid.z + cell.y), 0).r);
        if (code > 32 && code < 127) {
            int g = code - 32;
            // The texel itself, clamped into the glyph's own cell: text is drawn at 1:1, so
            // no filtering, and no sample can reach the neighbouring cell of the atlas.
            ivec2 origin = ivec2(g % 16, g / 16) * ivec2(u_cell);
            ivec2 inside = clamp(ivec2(floor(v_local - vec2(cell) * u_cell)), ivec2(0),
                                 ivec2(u_cell) - 1);
            cover = texelFetch(u_atlas, origin + inside, 0).r;
        }
    }
    float a_text = cover * v_fg.a;
    float a = a_text + v_bg.a * (1.0 - a_text);
    if (a <= 0.0) {
        discard;
    }
    vec3 rgb = (v_fg.rgb * a_text + v_bg.rgb * v_bg.a * (1.0 - a_text)) / a;
    f_color = vec4(rgb, a);
}
