#version 330 core
#extension GL_ARB_texture_gather : require
// One max-reduction step of the Z-pyramid (app/culling/occlusion.py documents the rule).
// With u_factor = 2 (the usual step) destination texel d takes source texels 2d and 2d+1 on
// each axis, and the last texel of a row or column also takes the leftover texel of an
// odd-sized source (3 texels), so the max is conservative at odd sizes. u_factor = 2^k jumps k
// levels at once (texel d covers [d * 2^k, (d + 1) * 2^k), the last one up to the edge), which
// is the same result as k steps: the first pass goes straight from the depth texture to the
// first level the CPU reads back. The source is the depth texture (compare mode off) or an
// R32F level.
//
// Interior texels read their 2^k x 2^k block with textureGather (4 texels per fetch; the
// sample point sits on the corner shared by the 2x2 texels it gathers); the last row and
// column, whose blocks may be wider, fall back to texelFetch. On llvmpipe at 1280x720 the
// gather path is ~4x faster than 16 texelFetch.
uniform sampler2D u_src;
uniform ivec2 u_src_size;
uniform ivec2 u_dst_size;
uniform int u_factor;

out float f_depth;

float max4(vec4 v) {
    return max(max(v.x, v.y), max(v.z, v.w));
}

void main() {
    ivec2 d = ivec2(gl_FragCoord.xy);
    float m = 0.0;
    if (d.x < u_dst_size.x - 1 && d.y < u_dst_size.y - 1) {
        vec2 inv = 1.0 / vec2(u_src_size);
        vec2 s0 = vec2(d * u_factor) + 1.0;
        for (int j = 0; j < u_factor; j += 2) {
            for (int i = 0; i < u_factor; i += 2) {
                m = max(m, max4(textureGather(u_src, (s0 + vec2(i, j)) * inv)));
            }
        }
    } else {
        ivec2 s = min(d * u_factor, u_src_size - 1);
        int nx = (d.x == u_dst_size.x - 1) ? u_src_size.x - s.x : u_factor;
        int ny = (d.y == u_dst_size.y - 1) ? u_src_size.y - s.y : u_factor;
        nx = max(nx, 1);
        ny = max(ny, 1);
        for (int j = 0; j < ny; ++j) {
            for (int i = 0; i < nx; ++i) {
                m = max(m, texelFetch(u_src, s + ivec2(i, j), 0).r);
            }
        }
    }
    f_depth = m;
}
