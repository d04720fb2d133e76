"""Routes for files: upload (multipart/form-data), list, read, content, delete (docs/files.md).

May import FastAPI/Starlette, schemas, deps, problems and the conversations layer's
``FileService``. The body is Starlette's parsed form: each file part spooled to disk past
1 MiB, read here a chunk at a time into the store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, File, Form, Path, Query, Request, Response, UploadFile, status
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.datastructures import UploadFile as StarletteUploadFile

from app.api.deps import CallerDep, CursorQuery
from app.api.paths import public_path
from app.api.problems import Unprocessable
from app.api.schemas.files import FileOut, FilePage
from app.conversations.files import FileService
from app.domain.media import ACCEPTED_TYPES
from app.storage.files import CHUNK_BYTES, FileRecord

router = APIRouter(prefix="/files", tags=["files"])

IdPath = Annotated[str, Path(description="The file's id.")]
CONTENT_SECURITY_POLICY = "default-src 'none'; sandbox"
_NOT_FOUND = {"description": "No such file, or one this caller's key may not see."}
UPLOAD_RESPONSES: dict[int | str, dict[str, Any]] = {
    413: {
        "description": "The file is larger than its kind allows (`file_too_large`, with "
        "`limit`): `PARLEY_FILE_MAX_IMAGE_BYTES` (default 10 MiB) for images, "
        "`PARLEY_FILE_MAX_DOCUMENT_BYTES` (default 32 MiB) for documents; or the body is larger "
        "than the larger of the two and 1 MiB more (`payload_too_large`), refused by its "
        "`Content-Length` before it is read."
    },
    415: {
        "description": "The bytes are no accepted kind — SVG, HTML, a ZIP, a polyglot, a PDF "
        "header and then no PDF —, or the file's name or declared type says another kind than "
        "its bytes (`unsupported_file`); or the body is in a `Content-Encoding`."
    },
    422: {
        "description": "No `file` part, two file parts, or an empty file (`empty_file`); each "
        "problem located in `errors`."
    },
}


def file_out(record: FileRecord) -> FileOut:
    return FileOut(
        id=record.id,
        name=record.name,
        media_type=record.media_type,
        size=record.size,
        sha256=record.sha256,
        created_at=record.created_at,
        purpose=record.purpose,
        width=record.width,
        height=record.height,
    )


async def _chunks(upload: UploadFile) -> AsyncIterator[bytes]:
    while chunk := await upload.read(CHUNK_BYTES):
        yield chunk


async def _one_file(request: Request) -> None:
    """422 unless the form holds exactly one file part (FastAPI would take the last of two)."""
    form = await request.form()  # the form FastAPI parsed: Starlette keeps it
    uploads = [(k, v) for k, v in form.multi_items() if isinstance(v, StarletteUploadFile)]
    if len(uploads) > 1:
        names = ", ".join(repr(k) for k, _ in uploads)
        raise Unprocessable(
            f"send one file a request: the form has {len(uploads)} file parts ({names})",
            errors=[{"loc": ["body", "file"], "msg": "one file only", "type": "too_many_files"}],
        )


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=FileOut,
    responses=UPLOAD_RESPONSES,
)
async def upload_file(
    request: Request,
    caller: CallerDep,
    file: Annotated[UploadFile, File(description="The file: an image, a PDF or UTF-8 text.")],
    purpose: Annotated[
        str | None, Form(max_length=64, description="What it is for (kept as given).")
    ] = None,
) -> Response:
    """Upload a file as `multipart/form-data` (`curl -F file=@cat.png`). Its kind is read from
    its bytes; the same bytes uploaded twice are stored once (a new file on the same bytes)."""
    await _one_file(request)
    files = FileService(caller.services, caller.owner)
    record = await files.upload(file.filename, file.content_type, _chunks(file), purpose)
    out = file_out(record)
    location = public_path(request.scope, f"/files/{out.id}")
    return JSONResponse(
        out.model_dump(mode="json"), status_code=201, headers={"Location": location}
    )


@router.get("", response_model=FilePage)
async def list_files(
    caller: CallerDep,
    limit: Annotated[int | None, Query(ge=1, description="Page size.")] = None,
    cursor: CursorQuery = None,
) -> FilePage:
    """Your files, newest first, a page at a time."""
    settings = caller.services.settings
    size = min(limit or settings.page_size, settings.max_page_size)
    records, next_cursor = await FileService(caller.services, caller.owner).list(size, cursor)
    return FilePage(items=[file_out(r) for r in records], next_cursor=next_cursor)


@router.get("/{file_id}", response_model=FileOut, responses={404: _NOT_FOUND})
async def get_file(file_id: IdPath, caller: CallerDep) -> FileOut:
    """A file's metadata."""
    return file_out(await FileService(caller.services, caller.owner).get(file_id))


def content_headers(record: FileRecord) -> dict[str, str]:
    """How the bytes are served: never as a page of Parley's origin."""
    disposition = "inline" if record.is_image else "attachment"
    fallback = "".join(
        c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in record.name
    )
    return {
        "Content-Length": str(record.size),
        "Content-Disposition": f'{disposition}; filename="{fallback}"; '
        f"filename*=UTF-8''{quote(record.name, safe='')}",
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": CONTENT_SECURITY_POLICY,
        "ETag": f'"{record.sha256}"',
        "Cache-Control": "private, max-age=0",
    }


@router.get(
    "/{file_id}/content",
    response_class=StreamingResponse,
    responses={
        200: {
            "description": "The bytes, with their media type.",
            "content": {
                media: {"schema": {"type": "string", "format": "binary"}}
                for media in sorted(ACCEPTED_TYPES)
            },
        },
        404: _NOT_FOUND,
    },
)
async def get_file_content(file_id: IdPath, caller: CallerDep) -> StreamingResponse:
    """The file's bytes: images inline, everything else as an attachment; never sniffed or
    run by a browser (`nosniff`, a sandboxing `Content-Security-Policy`)."""
    record, chunks = await FileService(caller.services, caller.owner).content(file_id)
    media_type = record.media_type
    if media_type.startswith("text/"):
        media_type += "; charset=utf-8"
    return StreamingResponse(chunks, media_type=media_type, headers=content_headers(record))


@router.delete(
    "/{file_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses={
        404: _NOT_FOUND,
        409: {
            "description": "A conversation's messages refer to the file (`file_in_use`, with "
            "`conversation_ids`): delete those first."
        },
    },
)
async def delete_file(file_id: IdPath, caller: CallerDep) -> Response:
    """Delete a file; its bytes go with the last file on them."""
    await FileService(caller.services, caller.owner).delete(file_id)
    return Response(status_code=204)
