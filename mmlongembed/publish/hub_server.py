"""A Hugging Face Hub look-alike on loopback, for testing publishing and loading without the real Hub.

It speaks the subset of the Hub's HTTP API that ``huggingface_hub`` (``create_repo``,
``create_commit``, ``create_tag``, ``create_branch``, ``list_repo_refs``, ``list_repo_tree``,
``get_paths_info``, ``list_repo_commits``, ``hf_hub_download``, ``HfFileSystem``) and
``datasets.load_dataset(repo, config, revision=...)`` use, so tests drive the real client code
over real HTTP. Point clients at it with ``HF_ENDPOINT=<server.endpoint>`` and set
``HF_HUB_DISABLE_XET=1``: uploads go through the classic LFS batch protocol, because the Xet
content-addressed store is a separate service this server does not imitate.

Faults are injected with :meth:`LoopbackHub.drop_connection`: the server reads a matching request
and closes the socket without answering, either before acting on it or after (the client then
cannot know whether its commit landed, the hard case for retries).

Everything is kept in memory. Request headers are never stored or printed, so a token sent by a
client cannot leak through the server's log (:attr:`LoopbackHub.requests` holds method and path).
"""

from __future__ import annotations

import base64
import contextlib
import datetime as _dt
import hashlib
import json
import re
import socket
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

REPO_TYPES = {"datasets": "dataset", "models": "model", "spaces": "space"}
# Files the real Hub's default .gitattributes routes to LFS, plus anything big or binary.
LFS_SUFFIXES = (".parquet", ".arrow", ".png", ".jpg", ".jpeg", ".gif", ".webp", ".mp4", ".bin", ".safetensors",
                ".zip", ".gz", ".tar", ".npy", ".pt", ".pkl")
LFS_SIZE_THRESHOLD = 10 * 1024 * 1024
DEFAULT_GITATTRIBUTES = "".join(f"*{s} filter=lfs diff=lfs merge=lfs -text\n" for s in LFS_SUFFIXES).encode()
LFS_POINTER_SIZE = 134


def _git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000Z")


@dataclass(frozen=True)
class FileEntry:
    size: int
    data: bytes
    lfs_sha256: str | None  # set for LFS files

    @property
    def blob_id(self) -> str:
        if self.lfs_sha256 is None:
            return _git_blob_sha1(self.data)
        pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.lfs_sha256}\nsize {self.size}\n"
        return _git_blob_sha1(pointer.encode())

    def tree_json(self, path: str) -> dict:
        item = {"type": "file", "oid": self.blob_id, "size": self.size, "path": path}
        if self.lfs_sha256 is not None:
            item["lfs"] = {"oid": self.lfs_sha256, "size": self.size, "pointerSize": LFS_POINTER_SIZE}
        return item


@dataclass
class Commit:
    oid: str
    parent: str | None
    title: str
    description: str
    date: str
    author: str
    files: dict[str, FileEntry]


@dataclass
class Repo:
    repo_type: str
    repo_id: str
    private: bool
    created_at: str
    commits: dict[str, Commit] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)

    def resolve(self, revision: str) -> Commit | None:
        """A branch, a tag or a full commit id -> the commit (as the Hub resolves revisions)."""
        oid = self.branches.get(revision) or self.tags.get(revision)
        if oid is None and revision in self.commits:
            oid = revision
        return self.commits.get(oid) if oid else None


@dataclass
class _Fault:
    method: str | None
    path_pattern: re.Pattern
    remaining: int
    after: bool  # act on the request, then drop (the client never learns the outcome)


class HubError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None, **extra):
        super().__init__(message)
        self.status, self.message, self.code, self.extra = status, message, code, extra


class _DropConnection(Exception):
    pass


class LoopbackHub:
    """In-memory Hub-compatible server on 127.0.0.1. Use as a context manager or start()/stop()."""

    def __init__(self, tokens: dict[str, str] | None = None, host: str = "127.0.0.1"):
        # token -> user name. A token is only ever compared, never logged or echoed back.
        self.tokens = dict(tokens or {})
        self.repos: dict[tuple[str, str], Repo] = {}
        self.lfs_objects: dict[str, bytes] = {}
        self.requests: list[tuple[str, str]] = []  # (method, path): what the clients asked, for assertions
        self._faults: list[_Fault] = []
        self._lock = threading.RLock()
        self._server = ThreadingHTTPServer((host, 0), _make_handler(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "LoopbackHub":
        self._thread = threading.Thread(target=self._server.serve_forever, name="loopback-hub", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "LoopbackHub":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- fault injection ---------------------------------------------------------------------------
    def drop_connection(self, path_regex: str, *, method: str | None = None, times: int = 1,
                        after: bool = False) -> None:
        """Close the socket without answering the next `times` requests whose path matches."""
        with self._lock:
            self._faults.append(_Fault(method, re.compile(path_regex), times, after))

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    def _take_fault(self, method: str, path: str) -> _Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.remaining > 0 and (fault.method in (None, method)) and fault.path_pattern.search(path):
                    fault.remaining -= 1
                    return fault
        return None

    # -- repo state helpers (also handy in tests) ----------------------------------------------------
    def repo(self, repo_id: str, repo_type: str = "dataset") -> Repo:
        return self.repos[(repo_type, repo_id)]

    def alias(self, repo_id: str, commit_id: str, revision: str = "main", repo_type: str = "dataset") -> Commit:
        """Make the full commit id ``commit_id`` (e.g. a real Hub sha that code pins) resolve to the
        files of ``revision`` (a branch, tag or commit of this server), so that clients asking for
        that pinned revision get what a test pushed. Returns the aliased commit."""
        if not re.fullmatch(r"[0-9a-f]{40}", commit_id):
            raise ValueError(f"a commit id is 40 lowercase hex digits, not {commit_id!r}")
        with self._lock:
            repo = self.repo(repo_id, repo_type)
            source = self._commit(repo, revision)
            commit = Commit(commit_id, source.parent, source.title, source.description, source.date, source.author,
                            dict(source.files))
            repo.commits[commit_id] = commit
        return commit

    def _new_commit(self, repo: Repo, parent: Commit | None, title: str, description: str, author: str,
                    files: dict[str, FileEntry]) -> Commit:
        oid = hashlib.sha1(uuid.uuid4().bytes).hexdigest()
        commit = Commit(oid, parent.oid if parent else None, title, description, _now(), author, files)
        repo.commits[oid] = commit
        return commit

    # -- request routing -----------------------------------------------------------------------------
    def handle(self, method: str, raw_path: str, headers, body: bytes):
        """-> (status, headers, body bytes). Raises HubError for error answers."""
        url = urlsplit(raw_path)
        path, query = url.path, parse_qs(url.query)
        user = self._user(headers)
        if path == "/api/whoami-v2" and method == "GET":
            if user is None:
                raise HubError(401, "Invalid credentials in Authorization header")
            return self._json({"type": "user", "name": user, "fullname": user, "orgs": [],
                               "auth": {"type": "access_token", "accessToken": {"role": "write"}}})
        if path == "/api/repos/create" and method == "POST":
            return self._create_repo(self._need_user(user), json.loads(body or b"{}"))
        if path == "/api/validate-yaml" and method == "POST":
            return self._validate_yaml(json.loads(body or b"{}"))

        m = re.fullmatch(r"/api/(datasets|models|spaces)/([^/]+/[^/]+)(?:/([a-z-]+)(?:/([^/]+)(/.*)?)?)?", path)
        if m:
            repo_type, repo_id, action = REPO_TYPES[m.group(1)], unquote(m.group(2)), m.group(3)
            revision = unquote(m.group(4)) if m.group(4) else None
            rest = unquote(m.group(5) or "").strip("/")
            repo = self._get_repo(repo_type, repo_id, user)
            return self._api(method, repo, action, revision, rest, query, headers, body, user)

        m = re.fullmatch(r"/(datasets/|spaces/)?([^/]+/[^/]+)\.git/info/lfs/objects/batch", path)
        if m and method == "POST":
            repo_type = {"datasets/": "dataset", "spaces/": "space"}.get(m.group(1) or "", "model")
            self._need_user(user)
            self._get_repo(repo_type, unquote(m.group(2)), user)
            return self._lfs_batch(json.loads(body or b"{}"))
        m = re.fullmatch(r"/lfs-upload/([0-9a-f]{64})", path)
        if m and method == "PUT":
            return self._lfs_put(m.group(1), body)
        if path == "/lfs-verify" and method == "POST":
            payload = json.loads(body or b"{}")
            if payload.get("oid") not in self.lfs_objects:
                raise HubError(404, "LFS object not found")
            return self._json({"success": True})

        m = re.fullmatch(r"/(datasets/|spaces/)?([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path)
        if m and method in ("GET", "HEAD"):
            repo_type = {"datasets/": "dataset", "spaces/": "space"}.get(m.group(1) or "", "model")
            repo = self._get_repo(repo_type, unquote(m.group(2)), user)
            return self._resolve(method, repo, unquote(m.group(3)), unquote(m.group(4)), headers)
        raise HubError(404, f"loopback hub does not implement {method} {path}")

    def _api(self, method, repo: Repo, action, revision, rest, query, headers, body, user):
        if action is None and method == "GET":
            return self._repo_info(repo, repo.resolve("main"))
        if action == "revision" and method == "GET":
            return self._repo_info(repo, self._commit(repo, revision))
        if action == "refs" and method == "GET":
            def refs(kind, names):
                return [{"name": n, "ref": f"refs/{kind}/{n}", "targetCommit": oid} for n, oid in sorted(names.items())]
            return self._json({"branches": refs("heads", repo.branches), "tags": refs("tags", repo.tags),
                               "converts": [], "pullRequests": []})
        if action == "tree" and method == "GET":
            recursive = query.get("recursive", ["false"])[0].lower() in ("1", "true")
            return self._json(self._tree(self._commit(repo, revision), rest, recursive))
        if action == "paths-info" and method == "POST":
            return self._paths_info(self._commit(repo, revision), headers, body)
        if action == "commits" and method == "GET":
            return self._json(self._history(repo, self._commit(repo, revision)))
        if action == "preupload" and method == "POST":
            self._need_user(user)
            return self._preupload(repo, self._commit(repo, revision), json.loads(body or b"{}"))
        if action == "commit" and method == "POST":
            return self._commit_ndjson(repo, revision, body, self._need_user(user))
        if action == "tag" and method == "POST":
            self._need_user(user)
            return self._create_tag(repo, revision, json.loads(body or b"{}"))
        if action == "branch" and method == "POST":
            self._need_user(user)
            return self._create_branch(repo, revision, json.loads(body or b"{}"))
        if action == "branch" and method == "DELETE":
            self._need_user(user)
            with self._lock:
                if revision == "main" or repo.branches.pop(revision, None) is None:
                    raise HubError(404, f"Cannot delete branch {revision}", "RevisionNotFound")
            return self._json({})
        raise HubError(404, f"loopback hub does not implement {method} /api/.../{action}")

    # -- auth & lookup -----------------------------------------------------------------------------
    def _user(self, headers) -> str | None:
        auth = headers.get("Authorization") or ""
        if not auth.startswith("Bearer "):
            return None
        user = self.tokens.get(auth[len("Bearer "):].strip())
        if user is None:
            raise HubError(401, "Invalid credentials in Authorization header")
        return user

    @staticmethod
    def _need_user(user: str | None) -> str:
        if user is None:
            raise HubError(401, "You must be authenticated to write to the Hub")
        return user

    def _get_repo(self, repo_type: str, repo_id: str, user: str | None) -> Repo:
        repo = self.repos.get((repo_type, repo_id))
        # Like the Hub, a private repo is indistinguishable from a missing one for outsiders.
        if repo is None or (repo.private and user is None):
            raise HubError(404, "Repository not found", "RepoNotFound")
        return repo

    @staticmethod
    def _commit(repo: Repo, revision: str | None) -> Commit:
        commit = repo.resolve(revision or "main")
        if commit is None:
            raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        return commit

    @staticmethod
    def _json(obj, status: int = 200, extra_headers: dict | None = None):
        return status, {"Content-Type": "application/json", **(extra_headers or {})}, json.dumps(obj).encode()

    # -- endpoints ---------------------------------------------------------------------------------
    def _create_repo(self, user: str, payload: dict):
        repo_type = payload.get("type") or "model"
        name, org = payload.get("name"), payload.get("organization")
        if not name:
            raise HubError(400, "name is required")
        repo_id = f"{org or user}/{name}"
        with self._lock:
            if (repo_type, repo_id) in self.repos:
                # The Hub's 409 carries the repo URL; create_repo(exist_ok=True) reads it.
                raise HubError(409, f"You already created this {repo_type} repo", url=self._repo_url(repo_type, repo_id))
            private = payload.get("private")
            if private is None:
                private = payload.get("visibility") == "private"
            repo = Repo(repo_type, repo_id, bool(private), _now())
            # The Hub opens every repo with a commit holding .gitattributes.
            first = self._new_commit(repo, None, "initial commit", "", user,
                                     {".gitattributes": FileEntry(len(DEFAULT_GITATTRIBUTES), DEFAULT_GITATTRIBUTES, None)})
            repo.branches["main"] = first.oid
            self.repos[(repo_type, repo_id)] = repo
        return self._json({"url": self._repo_url(repo_type, repo_id), "name": repo_id})

    def _repo_url(self, repo_type: str, repo_id: str) -> str:
        prefix = "" if repo_type == "model" else f"{repo_type}s/"
        return f"{self.endpoint}/{prefix}{repo_id}"

    @staticmethod
    def _validate_yaml(payload: dict):
        content = payload.get("content") or ""
        m = re.match(r"^---\n(.*?)\n---", content, re.S)
        if m:
            try:
                meta = yaml.safe_load(m.group(1))
            except yaml.YAMLError as err:
                return LoopbackHub._json({"errors": [{"message": f"Invalid YAML: {err}"}]}, 400)
            if meta is not None and not isinstance(meta, dict):
                return LoopbackHub._json({"errors": [{"message": "YAML metadata must be a mapping"}]}, 400)
        return LoopbackHub._json({"errors": [], "warnings": []})

    def _repo_info(self, repo: Repo, commit: Commit):
        return self._json({
            "_id": hashlib.md5(repo.repo_id.encode()).hexdigest()[:24], "id": repo.repo_id,
            "author": repo.repo_id.split("/")[0], "sha": commit.oid, "private": repo.private,
            "gated": False, "disabled": False, "downloads": 0, "likes": 0, "tags": [],
            "createdAt": repo.created_at, "lastModified": commit.date,
            "siblings": [{"rfilename": p} for p in sorted(commit.files)],
        })

    @staticmethod
    def _tree(commit: Commit, prefix: str, recursive: bool) -> list[dict]:
        prefix = prefix.strip("/")
        base = f"{prefix}/" if prefix else ""
        files = {p: e for p, e in commit.files.items() if p.startswith(base)}
        if prefix and not files:
            if prefix in commit.files:  # the Hub answers a file path with that one file
                return [commit.files[prefix].tree_json(prefix)]
            raise HubError(404, f"{prefix} does not exist", "EntryNotFound")
        out: dict[str, dict] = {}
        for path, entry in sorted(files.items()):
            parts = path[len(base):].split("/")
            for depth in range(1, len(parts)):
                if depth > 1 and not recursive:
                    break
                folder = base + "/".join(parts[:depth])
                out.setdefault(folder, {"type": "directory", "oid": hashlib.sha1(folder.encode()).hexdigest(),
                                        "size": 0, "path": folder})
            if recursive or len(parts) == 1:
                out[path] = entry.tree_json(path)
        return [out[k] for k in sorted(out)]

    def _paths_info(self, commit: Commit, headers, body: bytes):
        if (headers.get("Content-Type") or "").startswith("application/json"):
            paths = json.loads(body or b"{}").get("paths", [])
        else:
            paths = parse_qs(body.decode()).get("paths", [])
        out = []
        for p in paths:
            p = p.strip("/")
            if p in commit.files:
                out.append(commit.files[p].tree_json(p))
            elif any(f.startswith(p + "/") for f in commit.files):
                out.append({"type": "directory", "oid": hashlib.sha1(p.encode()).hexdigest(), "size": 0, "path": p})
        return self._json(out)

    @staticmethod
    def _history(repo: Repo, commit: Commit) -> list[dict]:
        out = []
        while commit is not None:
            message = commit.title + (f"\n\n{commit.description}" if commit.description else "")
            out.append({"id": commit.oid, "authors": [{"user": commit.author}], "date": commit.date,
                        "title": commit.title, "message": message})
            commit = repo.commits.get(commit.parent) if commit.parent else None
        return out

    def _preupload(self, repo: Repo, commit: Commit, payload: dict):
        files = []
        for f in payload.get("files", []):
            sample = base64.b64decode(f.get("sample") or "")
            lfs = (f["path"].lower().endswith(LFS_SUFFIXES) or f.get("size", 0) >= LFS_SIZE_THRESHOLD
                   or b"\0" in sample)
            existing = commit.files.get(f["path"])
            oid = None
            if existing is not None:
                oid = existing.lfs_sha256 if existing.lfs_sha256 else existing.blob_id
            files.append({"path": f["path"], "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False,
                          "oid": oid})
        return self._json({"files": files, "commitOid": commit.oid})

    def _lfs_batch(self, payload: dict):
        if payload.get("operation") != "upload":
            raise HubError(400, "only uploads are supported by the loopback hub")
        objects = []
        for obj in payload.get("objects", []):
            item = {"oid": obj["oid"], "size": obj["size"], "authenticated": True}
            if obj["oid"] not in self.lfs_objects:  # already stored objects need no upload (resume)
                item["actions"] = {
                    "upload": {"href": f"{self.endpoint}/lfs-upload/{obj['oid']}"},
                    "verify": {"href": f"{self.endpoint}/lfs-verify"},
                }
            objects.append(item)
        return 200, {"Content-Type": "application/vnd.git-lfs+json"}, json.dumps(
            {"transfer": "basic", "objects": objects, "hash_algo": "sha256"}).encode()

    def _lfs_put(self, oid: str, body: bytes):
        if hashlib.sha256(body).hexdigest() != oid:
            raise HubError(400, "uploaded content does not match its sha256")
        with self._lock:
            self.lfs_objects[oid] = body
        return 200, {"ETag": f'"{oid}"'}, b""

    def _commit_ndjson(self, repo: Repo, revision: str | None, body: bytes, user: str):
        revision = revision or "main"
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        if not lines or lines[0].get("key") != "header":
            raise HubError(400, "commit payload must start with a header line")
        header = lines[0]["value"]
        with self._lock:  # one commit at a time per server, like a git ref update under lock
            if revision not in repo.branches:
                raise HubError(404, f"Invalid rev id: {revision} (commits go to branches)", "RevisionNotFound")
            head = repo.commits[repo.branches[revision]]
            parent = header.get("parentCommit")
            if parent is not None and parent != head.oid:
                raise HubError(412, f"A commit has happened since. Please refresh and try again. "
                                    f"(parent {parent} is not the head {head.oid})")
            files = dict(head.files)
            for line in lines[1:]:
                key, value = line.get("key"), line.get("value") or {}
                path = value.get("path", "").strip("/")
                if key == "file":
                    data = base64.b64decode(value["content"])
                    files[path] = FileEntry(len(data), data, None)
                elif key == "lfsFile":
                    data = self.lfs_objects.get(value["oid"])
                    if data is None:
                        raise HubError(422, f"LFS object {value['oid']} for {path} was never uploaded")
                    files[path] = FileEntry(len(data), data, value["oid"])
                elif key == "deletedFile":
                    if files.pop(path, None) is None:
                        raise HubError(404, f"A file with this name doesn't exist: {path}", "EntryNotFound")
                elif key == "deletedFolder":
                    doomed = [p for p in files if p.startswith(path + "/")]
                    if not doomed:
                        raise HubError(404, f"A folder with this name doesn't exist: {path}", "EntryNotFound")
                    for p in doomed:
                        del files[p]
                else:
                    raise HubError(400, f"unknown commit operation {key!r}")
            commit = self._new_commit(repo, head, header.get("summary") or "", header.get("description") or "",
                                      user, files)
            repo.branches[revision] = commit.oid
        prefix = "" if repo.repo_type == "model" else f"{repo.repo_type}s/"
        return self._json({"success": True, "commitOid": commit.oid, "pullRequestUrl": None,
                           "commitUrl": f"{self.endpoint}/{prefix}{repo.repo_id}/commit/{commit.oid}"})

    def _create_tag(self, repo: Repo, revision: str | None, payload: dict):
        tag = payload.get("tag")
        if not tag:
            raise HubError(400, "tag is required")
        with self._lock:
            commit = self._commit(repo, revision)
            if tag in repo.tags or tag in repo.branches:
                raise HubError(409, f"Reference refs/tags/{tag} already exists")
            repo.tags[tag] = commit.oid
        return self._json({})

    def _create_branch(self, repo: Repo, branch: str | None, payload: dict):
        with self._lock:
            start = self._commit(repo, payload.get("startingPoint") or "main")
            if branch in repo.branches or branch in repo.tags:
                raise HubError(409, f"Reference refs/heads/{branch} already exists")
            repo.branches[branch] = start.oid
        return self._json({})

    def _resolve(self, method: str, repo: Repo, revision: str, path: str, headers):
        commit = self._commit(repo, revision)
        entry = commit.files.get(path)
        if entry is None:
            raise HubError(404, "Entry not found", "EntryNotFound")
        out = {"X-Repo-Commit": commit.oid, "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream",
               "ETag": f'"{entry.blob_id}"'}
        if entry.lfs_sha256:
            # The Hub redirects LFS files to a CDN and reports the linked object's etag and size.
            out["X-Linked-Etag"] = f'"{entry.lfs_sha256}"'
            out["X-Linked-Size"] = str(entry.size)
        data = entry.data
        status = 200
        rng = headers.get("Range")
        if rng:
            m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
            if not m:
                raise HubError(416, "bad range")
            start_s, end_s = m.groups()
            if start_s == "":
                start, end = max(0, entry.size - int(end_s)), entry.size - 1
            else:
                start, end = int(start_s), min(int(end_s) if end_s else entry.size - 1, entry.size - 1)
            if start >= entry.size and entry.size > 0:
                raise HubError(416, "range not satisfiable")
            data = data[start:end + 1]
            out["Content-Range"] = f"bytes {start}-{end}/{entry.size}"
            status = 206
        out["Content-Length"] = str(len(data))
        return status, out, (b"" if method == "HEAD" else data)


class _HubHandler(BaseHTTPRequestHandler):
    """The HTTP side of a LoopbackHub (``hub``, set by ``_make_handler``): every request is recorded,
    may be dropped by a fault, and is answered by ``hub.handle``."""

    protocol_version = "HTTP/1.1"
    hub: LoopbackHub

    def log_message(self, format, *args):  # noqa: A002 - silence stderr logging; see hub.requests
        pass

    def _read_body(self) -> bytes:
        if (self.headers.get("Transfer-Encoding") or "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _drop(self):
        # Abrupt close: the client sees its connection reset/closed with no response.
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def _answer(self, method: str, body: bytes) -> tuple[int, dict, bytes]:
        """The hub's answer; its errors as the Hub sends them (status, JSON body, error headers)."""
        try:
            return self.hub.handle(method, self.path, self.headers, body)
        except HubError as err:
            headers = {"Content-Type": "application/json", "X-Error-Message": err.message}
            if err.code:
                headers["X-Error-Code"] = err.code
            return err.status, headers, json.dumps({"error": err.message, **err.extra}).encode()
        except (ValueError, KeyError) as err:
            return 400, {"Content-Type": "application/json"}, json.dumps({"error": f"bad request: {err}"}).encode()

    def _serve(self, method: str):
        body = self._read_body()
        path = urlsplit(self.path).path
        self.hub.requests.append((method, path))
        fault = self.hub._take_fault(method, path)
        if fault is not None and not fault.after:
            return self._drop()
        status, headers, payload = self._answer(method, body)
        if fault is not None:
            return self._drop()
        self.send_response(status)
        headers.setdefault("Content-Length", str(len(payload)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if method != "HEAD":
            self.wfile.write(payload)

    def do_GET(self):
        self._serve("GET")

    def do_HEAD(self):
        self._serve("HEAD")

    def do_POST(self):
        self._serve("POST")

    def do_PUT(self):
        self._serve("PUT")

    def do_DELETE(self):
        self._serve("DELETE")


def _make_handler(hub: LoopbackHub):
    """A handler class serving `hub` (the server makes one handler per request)."""
    return type("Handler", (_HubHandler,), {"hub": hub})


def main() -> None:  # pragma: no cover - manual use: python -m mmlongembed.publish.hub_server TOKEN
    import sys
    import time

    hub = LoopbackHub({sys.argv[1]: "tester"} if len(sys.argv) > 1 else {}).start()
    print(f"HF_ENDPOINT={hub.endpoint}  (set HF_HUB_DISABLE_XET=1 in clients)", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        while True:
            time.sleep(3600)


if __name__ == "__main__":  # pragma: no cover
    main()
