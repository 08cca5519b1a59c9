# Every include in src/ points down the module layers (scripts/include_graph.py).
add_test(NAME Layering.IncludesPointDown
         COMMAND python3 ${PROJECT_SOURCE_DIR}/scripts/include_graph.py --check ${PROJECT_SOURCE_DIR}/src)
