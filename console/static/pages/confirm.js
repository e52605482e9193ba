// confirm.js: the confirmation every write action of the data pages asks
// for (producing a record, resetting a group's offsets).
import {html, useEffect, useRef} from '../vendor/preact-htm.mjs';

// ConfirmDialog is a modal <dialog> shown while open is true. Escape or
// Cancel calls onCancel; the confirm button calls onConfirm, and its
// label says what it does. The confirm button is focused first, but
// Cancel is when the action is dangerous, so Enter alone never resets.
export function ConfirmDialog({id, open, title, confirmLabel, danger, busy, onConfirm, onCancel, children}) {
  const ref = useRef(null);
  useEffect(() => {
    const d = ref.current;
    if (open && !d.open) {
      d.showModal();
    } else if (!open && d.open) {
      d.close();
    }
  }, [open]);
  const cancel = (ev) => {
    ev.preventDefault();
    onCancel();
  };
  return html`
    <dialog ref=${ref} id=${id} aria-labelledby=${id + '-title'} onCancel=${cancel}>
      <h2 id=${id + '-title'}>${title}</h2>
      ${open && children}
      <div class="toolbar dialog-actions">
        <button type="button" id=${id + '-cancel'} autofocus=${danger} onClick=${cancel} disabled=${busy}>Cancel</button>
        <button type="button" class=${danger ? 'danger' : 'primary'} id=${id + '-confirm'}
          autofocus=${!danger} onClick=${onConfirm} disabled=${busy}>${busy ? 'Working…' : confirmLabel}</button>
      </div>
    </dialog>`;
}
