// Implementation of ckpt/format/value_fields.h.
#include "ckpt/format/value_fields.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/status.h"

namespace zt::ckpt {

absl::StatusOr<const Value*> Fields::Get(const std::string& key) const {
  const Value* v = d_.Find(key);
  if (v == nullptr) return Missing(key);
  return v;
}

absl::StatusOr<int64_t> Fields::Int(const std::string& key) const {
  ZT_ASSIGN_OR_RETURN(const Value* v, Get(key));
  if (!v->is_int()) return Wrong(key, "an int", *v);
  return v->AsInt();
}

absl::StatusOr<double> Fields::Double(const std::string& key) const {
  ZT_ASSIGN_OR_RETURN(const Value* v, Get(key));
  if (!v->is_int() && !v->is_double()) return Wrong(key, "a number", *v);
  return v->AsDouble();
}

absl::StatusOr<bool> Fields::Bool(const std::string& key) const {
  ZT_ASSIGN_OR_RETURN(const Value* v, Get(key));
  if (!v->is_bool()) return Wrong(key, "a bool", *v);
  return v->AsBool();
}

absl::StatusOr<std::string> Fields::Str(const std::string& key) const {
  ZT_ASSIGN_OR_RETURN(const Value* v, Get(key));
  if (!v->is_string()) return Wrong(key, "a str", *v);
  return v->AsString();
}

absl::StatusOr<const Dict*> Fields::Sub(const std::string& key) const {
  ZT_ASSIGN_OR_RETURN(const Value* v, Get(key));
  if (!v->is_dict()) return Wrong(key, "a dict", *v);
  return &v->AsDict();
}

absl::StatusOr<const List*> Fields::Seq(const std::string& key) const {
  ZT_ASSIGN_OR_RETURN(const Value* v, Get(key));
  if (!v->is_list() && !v->is_tuple()) return Wrong(key, "a list", *v);
  return &v->AsList();
}

absl::Status Fields::Missing(const std::string& key) const {
  return absl::DataLossError(absl::StrCat("checkpoint file '", file_, "' has no '", where(key),
                                          "' (not a zerotorch or DeepSpeed checkpoint, or written by an "
                                          "incompatible version)"));
}

absl::Status Fields::Wrong(const std::string& key, const char* want, const Value& got) const {
  return absl::DataLossError(
      absl::StrCat("checkpoint file '", file_, "': '", where(key), "' is a ", got.TypeName(), ", expected ", want));
}

bool IsDenseView1D(const TensorRef& t, DType dtype) {
  if (t.dtype != dtype || t.shape.size() != 1 || t.storage_offset < 0) return false;
  if (!t.stride.empty() && t.shape[0] > 1 && t.stride[0] != 1) return false;
  const uint64_t end = static_cast<uint64_t>(t.storage_offset + t.numel()) * DTypeSize(dtype);
  return t.storage_nbytes == 0 || end <= t.storage_nbytes;
}

absl::StatusOr<std::vector<const TensorRef*>> TensorsOf(const List& l, size_t count, DType dtype,
                                                        const std::string& file, const std::string& what) {
  if (l.size() != count) {
    return absl::DataLossError(
        absl::StrFormat("checkpoint file '%s': %s has %d entries, the layout %d", file, what, l.size(), count));
  }
  std::vector<const TensorRef*> out;
  for (size_t i = 0; i < l.size(); ++i) {
    if (!l[i].is_tensor() || l[i].AsTensor().dtype != dtype || l[i].AsTensor().shape.size() != 1 ||
        !l[i].AsTensor().contiguous()) {
      return absl::DataLossError(absl::StrFormat("checkpoint file '%s': %s[%d] is not a 1-D %s tensor", file, what, i,
                                                 std::string(DTypeName(dtype))));
    }
    out.push_back(&l[i].AsTensor());
  }
  return out;
}

}  // namespace zt::ckpt
