/* Helpers shared by the kernel files; not part of the public API (llama.h). */
#ifndef HXK_INTERNAL_H
#define HXK_INTERNAL_H

/* log sum_j exp(row_j), stable (max subtracted), summed in double. */
double hxk_log_sum_exp(const float *row, int vocab);

#endif
