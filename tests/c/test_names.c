/* test_names.c -- the names and constants a binding reads from the library:
 * status symbols, mode and component names, the header's limits by index. */
#include <string.h>

#include "test.h"

TEST(status_symbol_should_name_every_status_as_its_enumerator) {
    CHECK(strcmp(kvc_status_symbol(KVC_OK), "KVC_OK") == 0);
    CHECK(strcmp(kvc_status_symbol(KVC_E_NOMEM), "KVC_E_NOMEM") == 0);
    CHECK(strcmp(kvc_status_symbol(KVC_E_WINDOW), "KVC_E_WINDOW") == 0);
    for (int s = KVC_OK; s <= KVC_E_NONFINITE_INPUT; s++) {
        const char *symbol = kvc_status_symbol((kvc_status)s);
        CHECK(symbol != NULL);
        CHECK(strncmp(symbol, s == KVC_OK ? "KVC_OK" : "KVC_E_", s == KVC_OK ? 7 : 6) == 0);
        for (int other = KVC_OK; other < s; other++) CHECK(strcmp(kvc_status_symbol((kvc_status)other), symbol) != 0);
    }
}

TEST(status_symbol_should_be_null_for_other_values) {
    CHECK(kvc_status_symbol((kvc_status)(KVC_E_NONFINITE_INPUT + 1)) == NULL);
    CHECK(kvc_status_symbol((kvc_status)-1) == NULL);
}

TEST(mode_message_should_list_every_mode_name) {
    char expected[256] = "mode is not one of ";
    for (int mode = 0; mode < KVC_MODE_COUNT; mode++) {
        if (mode > 0) strcat(expected, ", ");
        strcat(expected, kvc_mode_name((kvc_mode)mode));
    }
    CHECK(strcmp(kvc_status_name(KVC_E_MODE), expected) == 0);
}

TEST(mode_name_should_be_built_from_its_component_names) {
    static const char *const expected[KVC_MODE_COUNT] = {"f32", "q8",  "q8k",     "q8v",    "q4",
                                                         "q4k", "q4v", "q8k+q4v", "q4k+q8v"};
    for (int mode = 0; mode < KVC_MODE_COUNT; mode++) {
        CHECK(strcmp(kvc_mode_name((kvc_mode)mode), expected[mode]) == 0);
        const char *keys = kvc_component_name(kvc_mode_component((kvc_mode)mode, 0));
        const char *values = kvc_component_name(kvc_mode_component((kvc_mode)mode, 1));
        char composed[32];
        if (strcmp(keys, values) == 0) snprintf(composed, sizeof composed, "%s", keys);
        else if (strcmp(values, "f32") == 0) snprintf(composed, sizeof composed, "%sk", keys);
        else if (strcmp(keys, "f32") == 0) snprintf(composed, sizeof composed, "%sv", values);
        else snprintf(composed, sizeof composed, "%sk+%sv", keys, values);
        CHECK(strcmp(kvc_mode_name((kvc_mode)mode), composed) == 0);
    }
    CHECK(kvc_mode_name((kvc_mode)KVC_MODE_COUNT) == NULL);
    CHECK(kvc_mode_name((kvc_mode)-1) == NULL);
    CHECK(strcmp(kvc_component_name(KVC_COMPONENT_Q4), "q4") == 0);
    CHECK(kvc_component_name((kvc_component)KVC_COMPONENT_COUNT) == NULL);
}

TEST(mode_of_should_give_the_mode_of_every_pair_of_components) {
    for (int keys = 0; keys < KVC_COMPONENT_COUNT; keys++) {
        for (int values = 0; values < KVC_COMPONENT_COUNT; values++) {
            kvc_mode mode = KVC_MODE_COUNT;
            CHECK(kvc_mode_of((kvc_component)keys, (kvc_component)values, &mode) == KVC_OK);
            CHECK(kvc_mode_component(mode, 0) == (kvc_component)keys);
            CHECK(kvc_mode_component(mode, 1) == (kvc_component)values);
        }
    }
    kvc_mode mode = KVC_MODE_Q8;
    CHECK(kvc_mode_of((kvc_component)KVC_COMPONENT_COUNT, KVC_COMPONENT_F32, &mode) == KVC_E_MODE);
    CHECK(kvc_mode_of(KVC_COMPONENT_F32, (kvc_component)-1, &mode) == KVC_E_MODE);
    CHECK(mode == KVC_MODE_Q8);
    CHECK(kvc_mode_of(KVC_COMPONENT_F32, KVC_COMPONENT_F32, NULL) == KVC_E_NULL_POINTER);
}

TEST(keeps_window_should_hold_for_q4_alone) {
    CHECK(kvc_component_keeps_window(KVC_COMPONENT_F32) == 0);
    CHECK(kvc_component_keeps_window(KVC_COMPONENT_Q8) == 0);
    CHECK(kvc_component_keeps_window(KVC_COMPONENT_Q4) == 1);
    CHECK(kvc_component_keeps_window((kvc_component)KVC_COMPONENT_COUNT) == 0);
    CHECK(kvc_component_keeps_window((kvc_component)-1) == 0);
}

TEST(constants_should_give_each_listed_macro_once_with_its_value) {
    static const struct {
        const char *name;
        uint32_t value;
    } expected[] = {
        {"KVC_Q8_WINDOW", KVC_Q8_WINDOW},
        {"KVC_MAX_KV_HEADS", KVC_MAX_KV_HEADS},
        {"KVC_MAX_HEAD_DIM", KVC_MAX_HEAD_DIM},
        {"KVC_MAX_POSITIONS", KVC_MAX_POSITIONS},
        {"KVC_MAX_THREADS", KVC_MAX_THREADS},
        {"KVC_MODE_COUNT", KVC_MODE_COUNT},
        {"KVC_Q4_RESIDUAL_ROWS", KVC_Q4_RESIDUAL_ROWS},
        {"KVC_Q4_MAX_RESIDUAL_ROWS", KVC_Q4_MAX_RESIDUAL_ROWS},
        {"KVC_Q4_ROLLBACK_ROWS", KVC_Q4_ROLLBACK_ROWS},
        {"KVC_KIND_LINEAR", KVC_KIND_LINEAR},
        {"KVC_KIND_WINDOW", KVC_KIND_WINDOW},
        {"KVC_LM_IMPORTANCE", KVC_LM_IMPORTANCE},
        {"KVC_LM_VERIFY", KVC_LM_VERIFY},
        {"KVC_GGUF_UINT8", KVC_GGUF_UINT8},
        {"KVC_GGUF_INT8", KVC_GGUF_INT8},
        {"KVC_GGUF_UINT16", KVC_GGUF_UINT16},
        {"KVC_GGUF_INT16", KVC_GGUF_INT16},
        {"KVC_GGUF_UINT32", KVC_GGUF_UINT32},
        {"KVC_GGUF_INT32", KVC_GGUF_INT32},
        {"KVC_GGUF_FLOAT32", KVC_GGUF_FLOAT32},
        {"KVC_GGUF_BOOL", KVC_GGUF_BOOL},
        {"KVC_GGUF_STRING", KVC_GGUF_STRING},
        {"KVC_GGUF_ARRAY", KVC_GGUF_ARRAY},
        {"KVC_GGUF_UINT64", KVC_GGUF_UINT64},
        {"KVC_GGUF_INT64", KVC_GGUF_INT64},
        {"KVC_GGUF_FLOAT64", KVC_GGUF_FLOAT64},
        {"KVC_LM_BATCH", KVC_LM_BATCH},
        {"KVC_KIND_CONV", KVC_KIND_CONV},
        {"KVC_KIND_DELTA", KVC_KIND_DELTA},
        {"KVC_KIND_SHARED", KVC_KIND_SHARED},
        {"KVC_KIND_MAMBA2", KVC_KIND_MAMBA2},
        {"KVC_KIND_NONE", KVC_KIND_NONE},
        {"KVC_KIND_ATTN_MAMBA2", KVC_KIND_ATTN_MAMBA2},
        {"KVC_LM_SPAN", KVC_LM_SPAN},
        {"KVC_MAX_CHANNELS", KVC_MAX_CHANNELS},
        {"KVC_MAX_CONV_KERNEL", KVC_MAX_CONV_KERNEL},
        {"KVC_MAX_STEP_TOKENS", KVC_MAX_STEP_TOKENS},
        {"KVC_PROFILE_EMBED", KVC_PROFILE_EMBED},
        {"KVC_PROFILE_NORM", KVC_PROFILE_NORM},
        {"KVC_PROFILE_QUANTIZE", KVC_PROFILE_QUANTIZE},
        {"KVC_PROFILE_QKV", KVC_PROFILE_QKV},
        {"KVC_PROFILE_ROPE", KVC_PROFILE_ROPE},
        {"KVC_PROFILE_APPEND", KVC_PROFILE_APPEND},
        {"KVC_PROFILE_ATTEND", KVC_PROFILE_ATTEND},
        {"KVC_PROFILE_WO", KVC_PROFILE_WO},
        {"KVC_PROFILE_RECURRENT", KVC_PROFILE_RECURRENT},
        {"KVC_PROFILE_GATE_UP", KVC_PROFILE_GATE_UP},
        {"KVC_PROFILE_ACTIVATION", KVC_PROFILE_ACTIVATION},
        {"KVC_PROFILE_DOWN", KVC_PROFILE_DOWN},
        {"KVC_PROFILE_RESIDUAL", KVC_PROFILE_RESIDUAL},
        {"KVC_PROFILE_LOGITS", KVC_PROFILE_LOGITS},
        {"KVC_PROFILE_POOL_WAIT", KVC_PROFILE_POOL_WAIT},
        {"KVC_PROFILE_OPS", KVC_PROFILE_OPS},
    };
    const size_t count = sizeof expected / sizeof expected[0];
    size_t listed = 0;
    while (kvc_constant_name(listed) != NULL) listed++;
    CHECK(listed == count);
    CHECK(kvc_constant_value(count) == 0);
    for (size_t e = 0; e < count; e++) {
        size_t found = 0;
        for (size_t i = 0; i < listed; i++) {
            if (strcmp(kvc_constant_name(i), expected[e].name) != 0) continue;
            found++;
            CHECK(kvc_constant_value(i) == expected[e].value);
        }
        CHECK(found == 1);
    }
}

RUN_TESTS(CASE(status_symbol_should_name_every_status_as_its_enumerator),
          CASE(status_symbol_should_be_null_for_other_values),
          CASE(mode_message_should_list_every_mode_name),
          CASE(mode_name_should_be_built_from_its_component_names),
          CASE(mode_of_should_give_the_mode_of_every_pair_of_components),
          CASE(keeps_window_should_hold_for_q4_alone),
          CASE(constants_should_give_each_listed_macro_once_with_its_value))
