# Rewrites the package-relative imports of an mlir-tblgen Python file so
# that it can live in kgc.dialects instead of mlir.dialects.
file(READ "${IN}" text)
string(REPLACE "from ._ods_common import" "from mlir.dialects._ods_common import" text "${text}")
string(REPLACE "from ..ir import" "from mlir.ir import" text "${text}")
string(REPLACE "from ._kg_enum_gen import" "from kgc.dialects._kg_enum_gen import" text "${text}")
file(WRITE "${OUT}" "${text}")
