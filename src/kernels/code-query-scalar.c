#include "code-query-hilo.h"
#include "kernels.h"

void kvc_code_query__scalar(size_t d, float *x, uint8_t *codes, float *scales) {
    kvc_code_query_hilo(kvc_quantize_query__scalar, d, x, codes, scales);
}
