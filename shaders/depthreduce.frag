#version 330 core
// One max-reduction step of the Z-pyramid (app/culling/occlusion.py documents the rule).
// With u_factor = 2 (the usual step) destination texel d takes source texels 2d and 2d+1 on
// each axis, and the last texel of a row or column also takes the leftover texel of an
// odd-sized source (3 texels), so the max is conservative at odd sizes. u_factor = 2^k jumps k
// levels at once (texel d covers [d * 2^k, (d + 1) * 2^k), the last one up to the edge), which
// is the same result as k steps: the first pass goes straight from the depth texture to the
// first level the CPU reads back. The source is the depth texture (compare mode off) or an
// R32F level; texelFetch reads exact texels, no filtering.
uniform sampler2D u_src;
uniform ivec2 u_src_size;
uniform ivec2 u_dst_size;
uniform int u_factor;

out float f_depth;

void main() {
    ivec2 d = ivec2(gl_FragCoord.xy);
    ivec2 s0 = min(d * u_factor, u_src_size - 1);
    int nx = (d.x == u_dst_size.x - 1) ? u_src_size.x - s0.x : u_factor;
    int ny = (d.y == u_dst_size.y - 1) ? u_src_size.y - s0.y : u_factor;
    nx = max(nx, 1);
    ny = max(ny, 1);
    float m = 0.0;
    for (int j = 0; j < ny; ++j) {
        for (int i = 0; i < nx; ++i) {
            m = max(m, texelFetch(u_src, s0 + ivec2(i, j), 0).r);
        }
    }
    f_depth = m;
}
