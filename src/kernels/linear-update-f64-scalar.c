#include "kernels.h"

void kvc_linear_update_f64__scalar(size_t num_features, size_t dv, const double *decay,
                                   const double *phi_k, const double *v, const double *src,
                                   double *dst) {
    for (size_t f = 0; f < num_features; f++) {
        for (size_t j = 0; j < dv; j++) {
            dst[f * dv + j] = decay[f] * src[f * dv + j] + phi_k[f] * v[j];
        }
    }
}
