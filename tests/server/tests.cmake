# End-to-end tests of `deltallm serve`: each starts the real binary on a free loopback port with
# the built-in model and drives it (tests/server/e2e/).
find_program(DELTALLM_PYTHON3 NAMES python3 REQUIRED)
set(_serve_e2e ${dir}/e2e)
add_test(NAME Serve.BadInput
         COMMAND ${DELTALLM_PYTHON3} ${_serve_e2e}/bad_input_test.py $<TARGET_FILE:deltallm>)
set_tests_properties(Serve.BadInput PROPERTIES TIMEOUT 120)
add_test(NAME Serve.OpenAIClient
         COMMAND ${DELTALLM_PYTHON3} ${_serve_e2e}/openai_test.py $<TARGET_FILE:deltallm>)
set_tests_properties(Serve.OpenAIClient PROPERTIES TIMEOUT 120)
add_test(NAME Serve.Load
         COMMAND ${DELTALLM_PYTHON3} ${_serve_e2e}/load_test.py $<TARGET_FILE:deltallm>)
set_tests_properties(Serve.Load PROPERTIES TIMEOUT 120)
add_test(NAME Serve.Bench
         COMMAND ${DELTALLM_PYTHON3} ${_serve_e2e}/bench_test.py $<TARGET_FILE:deltallm>)
set_tests_properties(Serve.Bench PROPERTIES TIMEOUT 120)
