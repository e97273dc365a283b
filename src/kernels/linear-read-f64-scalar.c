#include "kernels.h"

void kvc_linear_read_f64__scalar(size_t num_features, size_t dv, const double *phi_q,
                                 const double *S, double *out) {
    for (size_t j = 0; j < dv; j++) out[j] = 0.0;
    for (size_t f = 0; f < num_features; f++) {
        for (size_t j = 0; j < dv; j++) out[j] += phi_q[f] * S[f * dv + j];
    }
}
