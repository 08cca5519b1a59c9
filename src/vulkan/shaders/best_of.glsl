// The largest value over a workgroup with the lowest index among equal ones (the order the host
// sampler ranks logits in); index 0xffffffff stands for no value. The includer declares WG (a
// power of two) and `shared float best_v[WG]; shared uint best_i[WG]`. Every thread calls it
// with its own candidate; the winner is left in best_v[0], best_i[0].
void best_of(float v, uint i) {
    uint t = gl_LocalInvocationID.x;
    best_v[t] = v;
    best_i[t] = i;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (t < s) {
            float o = best_v[t + s];
            uint oi = best_i[t + s];
            if (oi != 0xffffffffu && (best_i[t] == 0xffffffffu || o > best_v[t] || (o == best_v[t] && oi < best_i[t]))) {
                best_v[t] = o;
                best_i[t] = oi;
            }
        }
        barrier();
    }
}
