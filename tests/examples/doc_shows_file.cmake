# cmake -DDOC=<page.md> -DSOURCE=<file> -P doc_shows_file.cmake
# Fails unless DOC contains SOURCE's whole text inside a ``` code block.
file(READ "${DOC}" doc)
file(READ "${SOURCE}" source)
string(FIND "${doc}" "```cpp\n${source}```" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${DOC} does not show ${SOURCE} verbatim in a ```cpp block: copy the file into it again")
endif()
