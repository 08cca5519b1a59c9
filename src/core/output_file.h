// Writing an output file (a GGUF model, a logits dump) without ever losing data: the bytes go to a
// temporary file beside the target, which replaces the target only once complete. The target
// must be absent or a regular file: devices, FIFOs, sockets and folders are refused, a symbolic
// link is followed (its target file is replaced and the link stays), and a file with other hard
// links is refused (replacing it would silently separate the names). A replaced file keeps its
// mode. The temporary file is removed on every error and on SIGINT, SIGTERM and SIGHUP; SIGXFSZ
// (the file size limit) becomes an ordinary write error.
#pragma once

#include <string>

namespace dl {

class OutputFile {
  public:
    // Checks the target and creates the temporary file; throws dl::Error naming the path.
    explicit OutputFile(const std::string& path);
    // Removes the temporary file unless commit() succeeded.
    ~OutputFile();
    OutputFile(const OutputFile&) = delete;
    OutputFile& operator=(const OutputFile&) = delete;

    // The descriptor of the temporary file, open for reading and writing.
    int fd() const { return fd_; }
    const std::string& path() const { return path_; }
    const std::string& temp_path() const { return temp_; }

    // Gives the file its final mode, closes it and renames it over the target.
    void commit();

  private:
    std::string path_;    // as the user gave it
    std::string target_;  // what is replaced: path_ with a symbolic link resolved
    std::string temp_;
    int fd_ = -1;
    int slot_ = -1;  // its entry in the signal handler's list
    unsigned mode_ = 0;
    bool replace_ = false;  // the target exists
    unsigned uid_ = 0, gid_ = 0;
};

// Checks what OutputFile would check, without creating anything: a tool calls it before a long
// job so that a bad output path fails at once.
void check_output_path(const std::string& path);

}  // namespace dl
