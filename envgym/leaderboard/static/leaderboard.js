// envgym leaderboard: sortable tables and the episode picker. Plain JavaScript, no libraries.
(function () {
  "use strict";

  function cellValue(row, index, numeric) {
    var cell = row.cells[index];
    if (!cell) return numeric ? -Infinity : "";
    var raw = cell.hasAttribute("data-value") ? cell.getAttribute("data-value") : cell.textContent.trim();
    if (!numeric) return raw.toLowerCase();
    var value = parseFloat(raw);
    return isNaN(value) ? -Infinity : value;
  }

  function sortBy(table, header) {
    var headers = Array.prototype.slice.call(header.parentNode.children);
    var index = headers.indexOf(header);
    var numeric = header.getAttribute("data-type") === "num";
    // Numbers start high-to-low (best first), text A-to-Z; a second click reverses.
    var current = header.getAttribute("aria-sort");
    var descending = current ? current === "ascending" : numeric;
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellValue(a, index, numeric), y = cellValue(b, index, numeric);
      if (x < y) return descending ? 1 : -1;
      if (x > y) return descending ? -1 : 1;
      return 0;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    headers.forEach(function (h) { h.removeAttribute("aria-sort"); });
    header.setAttribute("aria-sort", descending ? "descending" : "ascending");
  }

  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("thead th").forEach(function (header) {
      header.addEventListener("click", function () { sortBy(table, header); });
    });
  });

  // The filter box: keep the rows whose text holds every typed word, ignoring case (the rule the
  // server applies to ?q=, so a typed filter and a shared ?q= link show the same rows).
  function filterRows(table, query) {
    var words = query.toLowerCase().split(/\s+/).filter(function (w) { return w; });
    Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
      var text = row.textContent.toLowerCase();
      row.hidden = !words.every(function (w) { return text.indexOf(w) >= 0; });
    });
  }

  document.querySelectorAll("form.filter input[data-table]").forEach(function (input) {
    var table = document.getElementById(input.getAttribute("data-table"));
    if (!table) return;
    input.addEventListener("input", function () { filterRows(table, input.value); });
  });

  var picker = document.getElementById("episode-picker");
  if (picker) {
    picker.addEventListener("change", function () {
      if (picker.value) window.location.href = picker.value;
    });
  }
})();
