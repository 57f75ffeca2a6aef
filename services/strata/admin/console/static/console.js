// Strata console: progressive enhancement only; every page works without this file.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  // Forms and buttons with data-confirm ask before they submit.
  document.querySelectorAll("form").forEach((form) => {
    form.addEventListener("submit", (event) => {
      const button = event.submitter;
      const question = (button && button.dataset.confirm) || form.dataset.confirm;
      if (question && !window.confirm(question)) {
        event.preventDefault();
      }
    });
  });
  // A search box with data-filter-table hides the rows whose name does not match as you type.
  document.querySelectorAll("input[data-filter-table]").forEach((input) => {
    const table = document.getElementById(input.dataset.filterTable);
    if (!table) return;
    input.addEventListener("input", () => {
      const needle = input.value.trim();
      table.querySelectorAll("tbody tr[data-name]").forEach((row) => {
        row.hidden = needle !== "" && !row.dataset.name.includes(needle);
      });
    });
  });
});
