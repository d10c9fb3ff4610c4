#!/bin/sh
# Real programs on a directory, printing what a user would compare: listings, checksums,
# outputs. tests/preload.rs runs it under LD_PRELOAD=libweft_preload.so on a Weft mount,
# on the mount without it, and in a local directory, and asks for the same output.
# Usage: programs.sh DIR (made empty by the caller).
set -eu
cd "$1"
mkdir -p src/sub fio
python3 -c "import sys; sys.stdout.buffer.write(bytes((i * 7 + 3) % 251 for i in range(3 << 20)))" > src/big.bin
echo hello > src/hello.txt
ln -s hello.txt src/link
printf 'int add(int a, int b) { return a + b; }\n' > src/sub/util.c
printf '#include <stdio.h>\nint add(int, int);\nint main(void) { printf("%%d\\n", add(2, 40)); return 0; }\n' > src/sub/main.c
printf 'prog: main.o util.o\n\t$(CC) -o $@ main.o util.o\nclean:\n\trm -f prog *.o\n' > src/sub/Makefile
echo "== tar"
tar cf t.tar src
mkdir x
tar xf t.tar -C x
(cd x/src && find . | sort && sha256sum big.bin hello.txt sub/util.c && readlink link)
cmp t.tar t.tar
echo "== cp, mv, rm"
cp -r src y
mv y/hello.txt y/moved.txt
rm y/link
ls y | sort
cat y/moved.txt
echo "== make"
(cd src/sub && make -s && ./prog && make -s clean && ls | sort)
echo "== descriptors across exec"
exec 3< src/hello.txt
cat <&3
exec 3<&-
(read -r line; echo "read: $line"; cat) < src/big.bin | wc -c
echo "== sqlite3"
sqlite3 db "create table t(x); insert into t values (1), (2), (40); select sum(x) from t;"
echo "== git"
git init -q repo
(cd repo && cp ../src/hello.txt . && git add . && git -c user.name=n -c user.email=e@x commit -qm m && git fsck && git cat-file -p 'HEAD^{tree}')
echo "== python"
python3 - <<'PY'
import hashlib, os, shutil
shutil.copytree("src", "pycopy", symlinks=True)
with open("pycopy/appended", "wb") as f:
    f.write(b"a" * 100)
with open("pycopy/appended", "ab") as f:
    f.write(b"b" * 10)
for root, dirs, files in sorted(os.walk("pycopy")):
    dirs.sort()
    for name in sorted(files):
        p = os.path.join(root, name)
        if not os.path.islink(p):
            print(p, os.stat(p).st_size, hashlib.sha256(open(p, "rb").read()).hexdigest()[:16])
print(os.readlink("pycopy/link"), sorted(os.listdir("pycopy")))
import subprocess
with open("sub_out", "w") as w:
    subprocess.run(["echo", "from a child"], stdout=w, check=True)
with open("src/hello.txt", "rb") as r:
    print(subprocess.run(["cat"], stdin=r, capture_output=True, check=True).stdout)
print(open("sub_out").read().strip())
PY
echo "== written, closed, read back at once"
# In one process, as git's config is: each file written, renamed over and read whole right
# after its close (the size the reader sees is the one the writer's close left).
python3 - <<'PY'
import os
whole = 0
for i in range(100):
    data = ("line %d\n" % i).encode() * (i + 1)
    with open("rb%d.lock" % i, "wb") as f:
        f.write(data)
    os.rename("rb%d.lock" % i, "rb%d" % i)
    with open("rb%d" % i, "rb") as f:
        whole += f.read() == data and os.stat("rb%d" % i).st_size == len(data)
    os.unlink("rb%d" % i)
print(whole, "of 100 read back whole")
PY
echo "== fio"
fio --name=v --directory=fio --size=4M --bs=64k --rw=randwrite --verify=crc32c --ioengine=psync --numjobs=2 --minimal | cut -d';' -f3,5
echo "== shell redirections"
# bash's builtins write standard output with stdio, whose calls no interposition sees.
bash -c 'echo one > redir.txt; echo two >> redir.txt; printf "%s\n" three >> redir.txt
read first < redir.txt; echo "first: $first"
exec 3>>redir.txt; echo four >&3; exec 3>&-'
cat redir.txt

echo "== stat"
stat -c '%n %s %F %a %h' src/big.bin src/sub src/link src/sub/Makefile
rm -rf x y pycopy repo fio
find . | sort
